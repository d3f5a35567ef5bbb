"""A Kafka broker over seglog's storage."""
