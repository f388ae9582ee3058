"""Adapters for the frameworks trainers run episodes in.

Each lives in its own module and imports its framework only there, so ``import fleet_sdk``
never loads them. Install the matching extra:

- ``fleet_sdk.integrations.openenv``: Fleet tasks as an OpenEnv ``Environment``
  (``pip install 'fleet-sdk[openenv]'``);
- ``fleet_sdk.integrations.skyrl``: a SkyRL-gym ``BaseTextEnv`` registered as ``"fleet"``
  (``pip install 'fleet-sdk[skyrl]'``);
- ``fleet_sdk.integrations.ray``: episodes fanned out over a Ray cluster
  (``pip install 'fleet-sdk[ray]'``); ``fleet_sdk.executors`` holds the framework-free parts.
"""
