"""The watch loop: the sans-IO long-poll state machine, its notifier thread, alarms and the loop that
pulls every watched persona through one sink. It knows no harness: a harness speaks to it through a
sink (docs/architecture.md)."""
