"""The built-in verbs of ``agentkit``, one ``Command`` per module (``agentkit.command``), registered under the
``agentkit.commands`` entry-point group as third parties' are: ``run`` and ``recipes``, ``models``, ``serve``,
``tool-server``, ``bench``, ``uncertainty``; ``ace``, ``revela`` and ``gamerl`` live in their packages."""
