"""The coordinators' state, without the network: what the broker's group and transaction
coordinators keep in ``__consumer_offsets`` and ``__transaction_state``, and the rules
their state follows.

- ``group_records``: the key and value schemas of ``__consumer_offsets``, every version;
- ``transaction_records``: those of ``__transaction_state``;
- ``group_loader``: a ``__consumer_offsets`` partition replayed into groups and offsets;
- ``group_state``, ``transaction_state``: the state tables and their transition checks.

Layering: uses ``storage``, ``records`` and ``errors``; the broker uses it.
"""
