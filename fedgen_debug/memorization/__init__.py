"""The memorization checker: canaries, exposure, random-sampling rank, beam-search extraction and
cross-client memorization of the auxiliary models (issue 12; augenstein2020 App. A.2)."""
