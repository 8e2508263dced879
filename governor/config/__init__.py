"""The admin's input: YAML → validated, frozen dataclasses.

* :mod:`governor.config.errors` — :class:`InputError`, the one error of the admin's input;
* :mod:`governor.config.source` — YAML/JSON with the line of every value;
* :mod:`governor.config.policy` — the policy file (``/etc/drfgov/drfgov.yaml``);
* :mod:`governor.config.names` — what a user or group name may be, and the lookups of names and ids;
* :mod:`governor.config.identity` — the policy applied to Unix users and groups (weights, exemptions).
"""
