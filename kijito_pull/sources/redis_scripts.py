"""The Lua scripts of the Redis source (sources/redis_streams.py): each a step Redis runs atomically, so
two relays, or a member and a holder, never interleave inside it. Redis's own `cjson` decodes records.
"""

#: Append one Kijito message once: KEYS[1] stream, KEYS[2] ids hash; ARGV kid, from, created, content,
#: urgent. Returns {1, entry id} when appended, {0, entry id} when it was there already. Keyed by the
#: Kijito id (not an explicit stream id derived from it): a late-visible id lower than the last one
#: appended must still be taken, and XADD refuses ids below the stream's top.
APPEND_LUA = """
local have = redis.call('HGET', KEYS[2], ARGV[1])
if have then return {0, have} end
local sid = redis.call('XADD', KEYS[1], '*', 'kid', ARGV[1], 'from', ARGV[2], 'created', ARGV[3],
                       'content', ARGV[4], 'urgent', ARGV[5])
redis.call('HSET', KEYS[2], ARGV[1], sid)
return {1, sid}
"""


#: Give one parked entry back to its group: KEYS[1] stream, KEYS[2] dead stream, KEYS[3] the group's holders
#: hash; ARGV group, stream id, idle ms, then the dead-letter entry ids to delete. Returns the number of
#: dead rows deleted, or -1 when the stream no longer holds the entry (trimmed): then nothing changes.
#: XCLAIM's FORCE creates the pending entry in this group's list although the entry was acknowledged;
#: the other groups' positions and pending lists are not touched.
RETRY_LUA = """
if #redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2]) == 0 then return -1 end
redis.call('XCLAIM', KEYS[1], ARGV[1], '~free', 0, ARGV[2], 'IDLE', ARGV[3], 'RETRYCOUNT', 0, 'FORCE', 'JUSTID')
redis.call('HDEL', KEYS[3], ARGV[2])
local n = 0
for i = 4, #ARGV do n = n + redis.call('XDEL', KEYS[2], ARGV[i]) end
return n
"""


#: A renewing holder's records of one group's holders hash (KEYS[1]): ARGV holder key, now, claim_after.
#: Each record of that holder gets `until` = min(now + claim_after, its `expires`); returns how many.
RENEW_LUA = """
local n = 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local ok, rec = pcall(cjson.decode, all[i + 1])
  if ok and type(rec) == 'table' and rec['holder'] == ARGV[1] then
    local until_ = tonumber(ARGV[2]) + tonumber(ARGV[3])
    if rec['expires'] and tonumber(rec['expires']) < until_ then until_ = tonumber(rec['expires']) end
    rec['until'] = until_
    redis.call('HSET', KEYS[1], all[i], cjson.encode(rec))
    n = n + 1
  end
end
return n
"""
