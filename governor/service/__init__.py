"""``drfgov run`` as a service, and the commands that look after it.

* :mod:`governor.service.daemon` — ticks, signals, reload, lifecycle;
* :mod:`governor.service.hostsetup` — a policy on this host: monitor, backend, capacity, shaping;
* :mod:`governor.service.state` — state.json; :mod:`governor.service.history` — SQLite history;
* :mod:`governor.service.snapshot` — the original limits, for restore after any exit;
* :mod:`governor.service.notify` — sd_notify; :mod:`governor.service.doctor` — host checks;
  :mod:`governor.service.pamstack` — whether a PAM service's session stack reaches pam_systemd;
* :mod:`governor.service.calibrate` — a disk's bandwidth; :mod:`governor.service.atomic` — file replacement.
"""
