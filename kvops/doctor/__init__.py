"""`kvops doctor` and `kvops size`, split along the pipeline: reading/ the inputs, judging/ them
against the playbooks, reproducing/ a failure, reporting/ the findings (docs/doctor.md, Structure)."""
