"""pi: the installer of the extension package and the Python side of its ack protocol."""
