"""Customer accounts, their closure records, and the workflow that closes an account."""
