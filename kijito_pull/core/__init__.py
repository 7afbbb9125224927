"""The core: engine, delivery loop, cursor state and its lock, the API client, models, events,
rendering, configuration and paths. Imports nothing from sinks/, watch/, harnesses/ or cli/
(docs/architecture.md)."""
