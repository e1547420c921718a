"""The Kafka edge: raw bytes in and out, offsets, commits and rebalances; it knows no model and
no codec, and loads no numpy.

* :mod:`.edge`: the contract both backends keep (:class:`~.edge.Edge`) and their shared lifecycle
  (:class:`~.edge.EdgeBase`);
* :mod:`.admin`: client configuration, reachability, topics;
* :mod:`.python_edge` (kafka-python, the default) with its :mod:`.fastpath`,
  :mod:`.producer_process` (its producer in a second process) and :mod:`.confluent_edge`
  (confluent-kafka);
* :mod:`.factory`: :func:`~.factory.open_edge`, the one place a backend is chosen;
* :mod:`.reader`: a topic read without a consumer group, to its end or followed (the commands,
  the state topic's scans).
* :mod:`.registry`: a schema registry's client (the writer's schema of an Avro record by id),
  over its Confluent-compatible REST API.
"""
