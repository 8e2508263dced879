#!/bin/sh
# Capture a cgroup's interface files as the running kernel writes them (tests/fixtures).
# Run inside the VM tier's guest as root: sh tests/vm/capture_fixtures.sh OUTDIR
set -eu
out=${1:?usage: capture_fixtures.sh OUTDIR}
mkdir -p "$out"
cd /sys/fs/cgroup
echo "+cpu +memory +io" > cgroup.subtree_control
mkdir -p drfgov-cap/user-1000.slice
echo "+cpu +memory +io" > drfgov-cap/cgroup.subtree_control
cg=drfgov-cap/user-1000.slice
disk=$(cat /sys/class/block/vda/dev)
echo "50000 100000" > $cg/cpu.max
echo 64M > $cg/memory.high
echo "$disk rbps=1048576 wiops=120" > $cg/io.max
sh -c "echo \$\$ > /sys/fs/cgroup/$cg/cgroup.procs; i=0; while [ \$i -lt 200000 ]; do i=\$((i+1)); done; dd if=/dev/vda of=/dev/null bs=64k count=16 iflag=direct 2>/dev/null"
for f in cpu.stat cpu.max cpu.weight cpu.pressure memory.current memory.stat memory.events memory.low \
         memory.high memory.max memory.pressure io.stat io.max io.pressure cgroup.procs cgroup.controllers \
         cgroup.subtree_control; do
    cp $cg/$f "$out/$f"
done
cp /proc/self/mountinfo "$out/mountinfo"
