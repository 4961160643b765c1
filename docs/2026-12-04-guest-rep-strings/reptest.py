#!/usr/bin/env python3
"""What -icount charges for clearing 4 KB: `rep stosb`, `rep stosq` and a loop of 8-byte
stores, timed by the guest's own clock (guest time = instructions x 16 ns at shift=4), and the
same on the host. Builds reptest.c statically, appends it to vm-tests' initramfs (run any
vm-tests scenario once first) and boots the 6.1 guest as the cost scenario does (TCG,
-icount shift=4, no network), once with -cpu max and once with max,-erms,-fsrm.
Usage: reptest.py [WORK_DIR]   (default: target/vm)"""
import glob, os, select, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
work = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "../../target/vm")
tmp = tempfile.mkdtemp()
exe = os.path.join(tmp, "reptest")
subprocess.run(["gcc", "-O2", "-static", "-o", exe, os.path.join(here, "reptest.c")], check=True)
kernel = sorted(glob.glob(os.path.join(work, "kernel/linux-image-6.1*/boot/vmlinuz-*")))[-1]

def newc(name, mode, data=b""):
    h = "070701" + "".join("%08x" % v for v in (0, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0))
    b = h.encode() + name.encode() + b"\0"
    b += b"\0" * (-len(b) % 4)
    return b + data + b"\0" * (-len(data) % 4)

base = open(os.path.join(work, "initramfs.cpio"), "rb").read()
initrd = os.path.join(tmp, "initrd.cpio")
with open(initrd, "wb") as f:
    f.write(base + b"\0" * (-len(base) % 512) + newc("reptest", 0o100755, open(exe, "rb").read()) + newc("TRAILER!!!", 0))

cmds = ["grep -o -w -E 'erms|fsrm|rep_good' /proc/cpuinfo | sort -u | tr '\\n' ' '; echo",
        "/reptest 200 4096 0", "/reptest 200 4096 1", "/reptest 200 4096 2", "/reptest 2000 0 0"]
print("host:")
for m in ("0", "1", "2"):
    print("  " + subprocess.run([exe, "100000", "4096", m], capture_output=True, text=True).stdout.strip())
for cpu in ("max", "max,-erms,-fsrm"):
    # The guest's init wants an eth0: a virtio NIC on QEMU's user network with no way out.
    p = subprocess.Popen(["qemu-system-x86_64", "-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none",
                          "-no-reboot", "-accel", "tcg,thread=single", "-cpu", cpu, "-smp", "1", "-m", "512",
                          "-kernel", kernel, "-initrd", initrd, "-append", "console=ttyS0 panic=-1 quiet vmtest.addr=198.18.77.2/24",
                          "-serial", "stdio", "-icount", "shift=4", "-netdev", "user,id=n0,restrict=on",
                          "-device", "virtio-net-pci,netdev=n0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    buf, sent, t0 = b"", False, time.time()
    try:
        while time.time() - t0 < 180:
            if select.select([p.stdout], [], [], 1)[0]:
                d = os.read(p.stdout.fileno(), 65536)
                if not d:
                    break
                buf += d
            if not sent and b"VMTEST-UP" in buf:
                p.stdin.write("".join(f"VMTEST-CMD {i + 1} {c}\n" for i, c in enumerate(cmds)).encode())
                p.stdin.flush()
                sent = True
            if f"VMTEST-END {len(cmds)} ".encode() in buf:
                break
    finally:
        p.kill()
    out = buf.decode(errors="replace")
    print(f"guest, -cpu {cpu}, -icount shift=4:")
    for line in out[out.find("VMTEST-BEGIN 1"):].splitlines():
        if not line.startswith("VMTEST-") and line.strip():
            print("  " + line.strip())
