"""`kvops doctor --repro`: a failure reproduced with a vLLM release's own code on CPU, or its
failing and fixed serve lines run."""
