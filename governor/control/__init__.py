"""The control loop (pure: the clock, the monitor and the backends are injected).

* :mod:`governor.control.model` — the types the loop shares with its adapters and views;
* :mod:`governor.control.demand` — each user's demand vector from the kernel's evidence;
* :mod:`governor.control.plan` — a DRF allocation → cgroup limits (memory safety rules);
* :mod:`governor.control.netplan` — a DRF allocation → HTB classes;
* :mod:`governor.control.loop` — :class:`~governor.control.loop.Governor`, one tick.
"""
