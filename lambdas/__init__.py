"""One thin handler per Lambda function: parse the event, wire the AWS
adapters, call a service, map errors."""
