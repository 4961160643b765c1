#!/usr/bin/env python3
"""The data segments each g2g server sent, from a capture of the server guest's NIC
(`VMT_PCAP_DIR=DIR vm-tests g2g ...` writes DIR/g2g-*-server.pcap): per server port, the
data segments, their mean size, the pure ACKs, and the short ones (below the 1448-octet MSS
with timestamps, retransmissions apart) split by whether the server had then sent all the
echo it held (every request octet that had arrived in order) or held more than it sent: a
short segment of the second kind was cut by a window, not by the data.
Usage: segments.py SERVER_PCAP"""
import struct
import sys
from collections import Counter, defaultdict

MSS = 1448
PORTS = {7000: "xsk", 7001: "kernel"}


def packets(path):
    """(src port, dst port, seq, flags, payload length) of each IPv4 TCP packet."""
    with open(path, "rb") as f:
        f.read(24)  # the file header; the packets' times are not needed
        while len(h := f.read(16)) == 16:
            d = f.read(struct.unpack("<IIII", h)[2])
            if len(d) < 54 or d[12:14] != b"\x08\x00" or d[23] != 6:
                continue
            ihl = (d[14] & 15) * 4
            total = struct.unpack(">H", d[16:18])[0]
            tcp = d[14 + ihl:]
            sp, dp, seq = struct.unpack(">HHI", tcp[:8])
            off = (tcp[12] >> 4) * 4
            yield sp, dp, seq, tcp[13], total - ihl - off


def main(path):
    isn, client_isn = {}, {}
    received = defaultdict(int)  # client octets the server held in order, per connection
    above = defaultdict(dict)  # client segments above that: start -> end
    seen = defaultdict(set)
    c = {p: Counter() for p in PORTS}
    for sp, dp, seq, flags, plen in packets(path):
        if dp in PORTS:  # client -> server
            k = (dp, sp)
            if flags & 2:
                client_isn[k] = seq + 1
                continue
            if k not in client_isn or plen == 0:
                continue
            o = (seq - client_isn[k]) % (1 << 32)
            above[k][o] = max(above[k].get(o, 0), o + plen)
            moved = True
            while moved:
                moved = False
                for s, e in list(above[k].items()):
                    if s <= received[k]:
                        if e > received[k]:
                            received[k] = e
                            moved = True
                        del above[k][s]
        elif sp in PORTS:  # server -> client
            k = (sp, dp)
            if flags & 2:
                isn[k] = seq + 1
                continue
            if k not in isn:
                continue
            if plen == 0:
                c[sp]["pure ACKs"] += 1
                continue
            o = (seq - isn[k]) % (1 << 32)
            c[sp]["data segments"] += 1
            c[sp]["octets"] += plen
            if o in seen[k]:
                c[sp]["sent again"] += 1
                continue
            seen[k].add(o)
            if plen < MSS:
                # The echo of octet i is octet i: all that was held went if the segment ends there.
                c[sp]["short, all held sent" if o + plen >= received[k] else "short, more held"] += 1
    print("| server | data segments | mean octets | short, more held | short, all held sent | sent again | pure ACKs |")
    print("|---|---|---|---|---|---|---|")
    for p, name in PORTS.items():
        x = c[p]
        print(f"| {name} | {x['data segments']:,} | {x['octets'] // max(x['data segments'], 1):,} "
              f"| {x['short, more held']:,} | {x['short, all held sent']:,} | {x['sent again']:,} | {x['pure ACKs']:,} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
