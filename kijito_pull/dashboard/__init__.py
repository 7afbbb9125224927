"""`kijito-pull dashboard`: a read-only live web page of every persona's mail, for the person at this machine.

An entry point beside `watch/`: `board.py` keeps the snapshot (the rows `status --json` prints, from
core/overview.py, plus Kijito's unread counts and Redis's group lag), `feeds.py` fills it (ONE Kijito
long-poll, the watch loop's own Notifier, however many browsers), `server.py` serves it on loopback to
whoever has the access key, and `static/` holds the page (plain HTML, CSS and JS, no build step; the
wheel carries it with the package). cli/dashboard_cmd.py wires it. Imports only core/ and watch/.
"""
