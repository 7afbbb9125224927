"use strict";
// The kijito-pull dashboard page: renders the board's snapshot (embedded in the page, then one per
// server-sent event). Data is only ever set as text, never parsed as HTML. No build step, no library.
(function () {
  const MAX_ROWS = 300;
  let snap = JSON.parse(document.getElementById("snapshot").textContent);
  let skew = 0;        // server clock minus ours, in ms
  let stream = "connecting";
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function row(cells, cls) {
    const tr = el("tr", null, cls);
    for (const c of cells) {
      const td = c instanceof Node ? c : el("td", c && c.text !== undefined ? c.text : c, c && c.cls);
      tr.appendChild(td);
    }
    return tr;
  }
  function fill(tbody, rows, empty, cols) {
    tbody.replaceChildren(...(rows.length ? rows : [row([{ text: empty }], "empty")]));
    if (!rows.length) tbody.firstChild.firstChild.colSpan = cols;
  }
  function ago(iso) {
    if (!iso) return "";
    const s = Math.max(0, (Date.now() + skew - Date.parse(iso)) / 1000);
    if (s < 60) return Math.floor(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  function agoCell(iso) { const td = el("td", ago(iso), "num age"); td.dataset.since = iso || ""; return td; }
  function ids(list) { return list.length > 4 ? list.slice(0, 4).join(", ") + ", … (" + list.length + ")" : list.join(", "); }
  function pill(name, state) { return el("span", name + ": " + state, "pill " + (state === "up" ? "up" : state === "down" ? "down" : "starting")); }
  function card(value, label, alert) {
    const c = el("div", null, "card" + (alert ? " alert" : ""));
    c.appendChild(el("div", value, "value")); c.appendChild(el("div", label, "label"));
    return c;
  }

  function render() {
    skew = Date.parse(snap.now) - Date.now();
    const k = snap.kijito, r = snap.redis;
    $("pills").replaceChildren(pill("Kijito", k.state), ...(r ? [pill("Redis", r.state)] : []),
      el("span", stream === "live" ? "live" : stream, "pill " + (stream === "live" ? "up" : "starting")));
    $("updated").textContent = snap.api_base + " · updated " + new Date(Date.parse(snap.now)).toLocaleTimeString();

    const banners = [];
    if (k.state === "down") {
      const b = el("div", "Kijito is unreachable (" + snap.api_base + "): " + (k.error || "no answer") +
        ". Unread counts are from before " + (k.since ? new Date(Date.parse(k.since)).toLocaleTimeString() : "the failure") +
        "; this machine's cursors below are current.", "banner");
      b.id = "kijito-down"; banners.push(b);
    } else if (k.state === "starting") {
      banners.push(el("div", "Waiting for Kijito's first answer…", "banner warn"));
    }
    if (r && r.state === "down") {
      const b = el("div", "Redis is unreachable (" + r.source + "): " + (r.error || "no answer") +
        ". Group lag and pending are not current.", "banner"); b.id = "redis-down"; banners.push(b);
    }
    for (const problem of snap.problems || []) banners.push(el("div", problem, "banner warn"));
    if (stream !== "live") banners.push(el("div", "The dashboard server is not answering (" + stream +
      "); showing the last data it sent.", "banner warn"));
    $("banners").replaceChildren(...banners);

    const unreadPersonas = snap.personas.filter((p) => p.unread > 0).length;
    const unread = snap.personas.reduce((n, p) => n + p.unread, 0);
    const pendingN = snap.pending.reduce((n, p) => n + (p.holder ? p.ids.length : 0), 0);
    const lastWake = snap.wakes.rows[0];
    $("cards").replaceChildren(
      card(snap.personas.length, "personas"),
      card(unread, "unread at Kijito (" + unreadPersonas + " personas)"),
      card(pendingN, "pending hand-overs"),
      card(snap.confirmations.last_hour, "confirmed in the last hour"),
      card(snap.parked.length, "parked messages", snap.parked.length > 0),
      card(lastWake ? lastWake.seconds.toFixed(2) + " s" : "–", "last wake latency"),
      ...(r ? [card(r.groups.reduce((n, g) => n + (g.lag || 0), 0), "Redis group lag", r.groups.some((g) => g.lag > 0))] : []));

    const needle = $("filter").value.trim().toLowerCase();
    const shown = snap.personas.filter((p) => !needle || p.persona.toLowerCase().includes(needle));
    fill($("personas").tBodies[0], shown.slice(0, MAX_ROWS).map((p) => {
      const cursors = el("td");
      for (const c of p.cursors) cursors.appendChild(el("span", c.consumer + " @ " + (c.cursor === null ? "–" : c.cursor) +
        (c.status !== "ok" ? " " + c.status : ""), "tag " + c.status));
      if (!p.cursors.length) cursors.appendChild(el("span", "none here", "muted"));
      const tr = row([{ text: p.persona }, { text: p.unread, cls: "num unread" + (p.unread ? " hot" : "") },
        { text: p.urgent || "", cls: "num" }, cursors, { text: p.pending || "", cls: "num pending" },
        { text: p.parked || "", cls: "num" + (p.parked ? " hot" : "") }], p.unread || p.pending ? "busy" : "");
      tr.dataset.persona = p.persona;
      return tr;
    }), needle ? "no persona matches" : "no personas yet", 6);
    $("personas-more").textContent = shown.length > MAX_ROWS ? (shown.length - MAX_ROWS) +
      " more (quiet first filtered last); type in the filter to find one" : "";

    fill($("pending").tBodies[0], snap.pending.map((p) => row([p.persona, p.harness || (p.holder ? "" : "released"),
      p.session || "", ids(p.ids), agoCell(p.since), { text: p.handovers + "×", cls: "num" }])), "nothing pending", 6);

    fill($("confirmations").tBodies[0], snap.confirmations.rows.map((c) =>
      row([c.persona, { text: c.id, cls: "num" }, c.holder || c.consumer, agoCell(c.at)])), "none in the last hour", 4);

    fill($("wakes").tBodies[0], snap.wakes.rows.map((w) => row([w.persona, w.consumer,
      { text: w.seconds.toFixed(2) + " s", cls: "num" }, w.how, agoCell(w.delivered_at)])), "no delivery seen yet", 5);
    $("wakes-panel").querySelector(".note").textContent = "Measured " + snap.wakes.measured + ", since this dashboard started.";

    fill($("parked").tBodies[0], snap.parked.map((p) => row([p.persona, { text: p.id, cls: "num" },
      { text: p.attempts, cls: "num" }, { text: p.reason, cls: "wrap" }, agoCell(p.since)])), "no parked mail", 5);

    $("redis-panel").hidden = !r;
    if (r) {
      fill($("groups").tBodies[0], r.groups.map((g) => row([g.persona, g.group, { text: g.lag === null ? "?" : g.lag, cls: "num" },
        { text: g.pending, cls: "num" }, Object.entries(g.holders || {}).map(([n, c]) => n + ": " + c).join(", ")])),
        r.state === "starting" ? "reading Redis…" : "no consumer groups yet", 5);
      fill($("relay").tBodies[0], r.relay.map((x) => row([x.persona, x.newest_at ? ago(x.newest_at) + " ago" : "empty",
        x.behind_since ? { text: "behind since " + ago(x.behind_since), cls: "hot" } :
          x.last_lag !== null ? x.last_lag.toFixed(2) + " s (last)" : "up to date"])), "no streams", 3);
    }
    $("footer").textContent = "Read-only. Kijito: " + (k.long_polling ? "one long-poll" : "polling") +
      " for this page, however many browsers. " + (snap.other_cursors ? snap.other_cursors + " cursor(s) of other API bases not shown. " : "") +
      "Version " + snap.version + ".";
  }

  function tick() {
    for (const td of document.querySelectorAll("td.age")) td.textContent = ago(td.dataset.since);
  }

  const events = new EventSource("events" + location.search);
  events.onopen = () => { stream = "live"; render(); };
  events.onmessage = (e) => { stream = "live"; snap = JSON.parse(e.data); render(); };
  events.onerror = () => { stream = "reconnecting"; render(); };
  $("filter").addEventListener("input", render);
  setInterval(tick, 1000);
  render();
})();
