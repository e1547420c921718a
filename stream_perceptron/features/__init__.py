"""The features layer (pure): an event (any JSON object, a decoded Avro record) made into a
labeled example by a declared spec (:mod:`.spec`): paths into the event (:mod:`.paths`), the
example's named features (:mod:`.extract`), and online standardization kept per partition
(:mod:`.standardize`).

Nothing is imported here: the settings read :mod:`.spec` alone, which loads neither numpy nor a
JSON library, so the Kafka edge, which reads the settings, stays light."""
