"""The codec layer (pure): what a record may hold (:mod:`.limits`), input records decoded with the
reason for every rejection (:mod:`.inputs`, with :mod:`.dense_json` for dense batches), Avro
records in the Confluent wire format read with their writer's schema (:mod:`.avro`), and the
output records encoded (:mod:`.outputs`); where the compiled part is installed, its dense reader
and prediction encoder (:mod:`.native`) give the same results faster.

Imports only the standard library, numpy, the JSON libraries, fastavro and the compiled part: no
Kafka client, no files, no clock. :mod:`.limits` loads none of them until an output bound is
checked, so the settings (and through them the Kafka edge) load no numpy.
"""
