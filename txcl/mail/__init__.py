"""Mail in: the pure parts of the LMTP inlet (no server, no store).

- `message`: a delivered message as the `@lmtp.msg.*` facts;
- `routing`: which stack a recipient's mail goes to;
- `verdict`: the per-recipient LMTP replies from what the rules wrote in `@lmtp.res`;
- `envelope`: the envelope a stack receives for one delivery.

The server (txcl.serve.lmtp) and `txcl test` cases with `mail:` use them.
"""
