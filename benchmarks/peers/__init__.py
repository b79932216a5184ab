"""attncli against other toolkits on the same data, the same core and the same minutes.

Each peer is a script run as `python -m benchmarks.peers.NAME` (`joeynmt`: Joey NMT 2.3).
The peer runs in a virtual environment of its own, which the script creates; both sides
read the same files (`shared_data`), train side by side under one clock (`side_by_side`)
and are scored by the same sacreBLEU call.
"""
