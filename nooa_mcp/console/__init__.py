"""The memory console: a local web front end over the Memory facade.

`Console` is the application (mount it anywhere, or serve it with `serve`); an
`Authenticator` decides whose memory a request sees. Nothing here reads the store directly:
every page and action is a Memory facade call as the request's owner.
"""

from .app import Console, standalone_app
from .auth import Authenticator, LoopbackOnly, TokenLogin

__all__ = ["Authenticator", "Console", "LoopbackOnly", "TokenLogin", "standalone_app"]
