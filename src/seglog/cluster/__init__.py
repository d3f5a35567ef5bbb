"""The cluster: brokers coordinated through ZooKeeper, as Kafka 2.x-3.x did before KRaft.

Pure parts (no I/O): ``znodes`` (Kafka's znode paths and JSON), ``assignment``
(``AdminUtils.assignReplicasToBrokers``), ``state_machine`` (the controller's
partition and replica state tables), ``leader_election`` (the election
strategies), ``leader_balance`` (the preferred-leader imbalance check). Parts
that talk to ZooKeeper through kazoo: ``zk_client`` (registration, cluster id,
the controller epoch and fenced writes) and ``controller_election``.
``zookeeper_server`` runs a ZooKeeper server for tests and ``seglog cluster``.
"""
