# The lab both scripts of this study use (sourced, with `tag` set): namespaces ${tag}s
# (server, 198.18.93.1/16 on ${tag}a) and ${tag}c (client, 198.18.93.2/16 on ${tag}b,
# plus 1,000 consecutive addresses from 198.18.100.1 as rr-bench --sources takes them;
# noprefixroute: the /16 is routed once), removed on every exit with the process in
# $child (killed with SIGINT) if one runs.
S=${tag}s; C=${tag}c
child=
cleanup() { [ -n "$child" ] && kill -INT $child 2>/dev/null; ip netns del $S 2>/dev/null || true; ip netns del $C 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add $S; ip netns add $C
ip link add ${tag}a type veth peer name ${tag}b
ip link set ${tag}a netns $S; ip link set ${tag}b netns $C
ip -n $S addr add 198.18.93.1/16 dev ${tag}a; ip -n $C addr add 198.18.93.2/16 dev ${tag}b
ip -n $S link set ${tag}a up; ip -n $C link set ${tag}b up
for k in $(seq 1 1000); do echo "addr add 198.18.$((100 + k / 256)).$((k % 256))/16 dev ${tag}b noprefixroute"; done | ip -n $C -batch -
