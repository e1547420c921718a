"""The codec layer (pure): what a record may hold (:mod:`.limits`), input records decoded with the
reason for every rejection (:mod:`.inputs`, with :mod:`.dense_json` for dense batches), Avro
records in the Confluent wire format read with their writer's schema (:mod:`.avro`), and the
output records encoded (:mod:`.outputs`).

Imports only the standard library, numpy, the JSON libraries and fastavro: no Kafka client, no
files, no clock. :mod:`.limits` loads none of them until an output bound is checked, so the settings (and
through them the Kafka edge) load no numpy.
"""
