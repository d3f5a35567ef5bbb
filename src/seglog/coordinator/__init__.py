"""The coordinators' state, without the network: what the broker's group and transaction
coordinators keep in ``__consumer_offsets`` and ``__transaction_state``, and the rules
their state follows.

- ``group_records``: the key and value schemas of ``__consumer_offsets``, every version;
- ``transaction_records``: those of ``__transaction_state``;
- ``group_loader``: a ``__consumer_offsets`` partition replayed into groups and offsets;
- ``group_state``, ``transaction_state``: the state tables and their transition checks;
- ``classic_group``, ``group_coordinator``: classic groups and their membership rules;
- ``partitioning``: which partition holds a group or transactional id;
- ``group_offsets``, ``offset_manager``: committed offsets, their commits and expiry;
- ``group_admin``: ListGroups, DescribeGroups, DeleteGroups;
- ``producer_id_manager``, ``transaction_metadata``, ``transaction_coordinator``:
  producer ids and the transaction coordinator;
- ``stores``: what both coordinators share about their outputs, the stores they ask the
  broker for and an append's error as they answer it;
- ``broker_keys``: their configs read from the broker's keys, with ``seglog.config``'s defaults.

Layering: uses ``storage``, ``records`` and ``errors``; the broker uses it.
"""
