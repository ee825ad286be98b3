"""Prints a free loopback TCP port for a test's server (PostgreSQL, Tansu, stunnel, HTTP).

Tests run in parallel (ctest -j), and a port is free only until its server binds it. A port
from bind(0) is an ephemeral one: any parallel test's outgoing connection or bind(0) may take
it in between. This one is picked at random below net.ipv4.ip_local_port_range, where the
kernel hands out none, and checked by binding it; callers that still lose it (another test
picked the same one) retry with a new one.
"""
import random
import socket

try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
lo, hi = (10000, low - 1) if low > 11000 else (low // 2, low - 1)
for _ in range(200):
    port = random.randint(lo, hi)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("free_port: no free port in %d..%d" % (lo, hi))
