"""cgroup v2 file layer: typed readers and writers named after kernel files (no policy).

Its modules arrive with the cgroup v2 issue; the package exists now so the distribution's
layout is fixed from the start.
"""
