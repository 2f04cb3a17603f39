"""Quality evaluation: gold questions, `make eval`, docs/EVAL.md."""
