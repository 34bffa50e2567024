"""The firmware console: its wire format (frames.py), the client that runs models over it
(client.py) and the human console that shows it (monitor.py). Knows nothing of builds or boards."""
