"""Per-user measurement: samples and rates from cgroup v2 files and /proc (never writes).

Its modules arrive with the monitors issue; the package exists now so the distribution's
layout is fixed from the start.
"""
