"""The state layer: durable checkpoints of the model, its statistics and the input offsets they
reflect. Knows records and offsets, never a Kafka client."""
