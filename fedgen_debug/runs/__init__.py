"""The run store (`store`) and the run secret (`secret`): TF-free, the only code touching run files."""
