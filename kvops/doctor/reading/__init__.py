"""Reading doctor's inputs: the serve line (as the user wrote it, with each release's flag
table), the model's config, the platform, vLLM releases; the typed facts a log yields."""
