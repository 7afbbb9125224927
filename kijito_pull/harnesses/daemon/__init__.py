"""The supervised daemon: systemd/launchd templates and their installer."""
