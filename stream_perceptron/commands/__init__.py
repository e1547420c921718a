"""What the ``stream-perceptron`` subcommands do beyond running the worker: the embedded broker,
the demo, the offline fit, produce, read, watch and plot. The CLI parses; these act."""
