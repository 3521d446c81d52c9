"""What the gateway tells its operator as it runs: access lines and log output."""
