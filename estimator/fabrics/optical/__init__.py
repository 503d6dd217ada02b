"""Helpers shared by the optical fabrics (Lumorph, SiPAC, TeraRack, OPSquare, OCS).

* :mod:`.wdm_ring_steps` — step counts of all-gather schemes on a WDM optical ring (OpTree paper).
* :mod:`.pricing` — alpha-beta pricing of per-round schedules with circuit reconfiguration,
  memoisation and ``algorithm=auto`` selection, on top of the shared collective library.
"""
