"""Reading vLLM load: the exposition-format parser, the vLLM metric reader, scrape and PromQL adapters."""
