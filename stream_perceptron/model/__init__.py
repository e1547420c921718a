"""The model layer (pure): Rosenblatt's perceptron, sparse rows of named features, the running
statistics (E_n, margins, R, the (R/γ)² bound) and the learner that advances them together.

Imports only the standard library, numpy, river and :mod:`stream_perceptron.errors`: no Kafka
client, no files, no clock (``tests/unit/test_layers.py`` holds it to that).
"""
