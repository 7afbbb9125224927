"""Where mail goes for scripts: the Sink contract (base) and each sink (stdout, lines, exec, events
file). Imports only the core."""
