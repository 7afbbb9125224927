"""tests/redis/: a real redis-server per test (tests/redisserver.py)."""

from tests.redisserver import redis_server  # noqa: F401 - the fixture
