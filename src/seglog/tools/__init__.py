"""The subcommands of the ``seglog`` command line."""

# the client id the commands' requests carry (Kafka's tools say adminclient-N, consumer-N ...)
CLIENT_ID = "seglog-cli"
