"""The admin's input: YAML → validated, frozen dataclasses.

* :mod:`governor.config.source` — YAML/JSON with the line of every value; :class:`InputError`;
* :mod:`governor.config.policy` — the policy file (``/etc/drfgov/drfgov.yaml``);
* :mod:`governor.config.identity` — the policy applied to Unix users and groups (weights, exemptions).
"""
