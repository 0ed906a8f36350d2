"""ACE (arXiv 2510.04618): adapt an agent by evolving its context, a playbook of itemised strategies.

- ``playbook``: typed sections and bullets (stable ids, helpful / harmful / neutral / used counters), the paper's
  text format and a lossless JSON form;
- ``deltas``: ADD, UPDATE, TAG, MERGE, REMOVE merged deterministically, without a model call, under documented
  conflict rules (a batch's result does not depend on the order its deltas arrive in);
- ``store``: the playbook file and its append-only delta log (history, rebuild, rollback, byte-exact replay).
"""
