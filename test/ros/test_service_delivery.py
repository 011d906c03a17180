"""Service answers that DDS drops are recovered, on both sides (``wmr_model.ros.runner``).

Fast DDS drops a response when the server has not yet discovered the client's response reader
(rclpy only warns "failed to send response (timeout)"); CI saw a prediction request wait 600 s
for such an answer. The loss cannot be provoked on demand, so these tests inject it into a real
service over real DDS, in the form rclpy reports it: the response is not sent and that warning
is raised. The server side must re-send it; the client side must re-send a request that got no
answer.
"""

from __future__ import annotations

import math
import warnings

import pytest

pytestmark = pytest.mark.timeout(60)


class _Server:
    """A Trigger service on the harness's executor whose first ``lose`` responses are dropped
    as Fast DDS drops them: nothing sent, rclpy's RuntimeWarning raised."""

    def __init__(self, ros, name: str, lose: int, reliable: bool):
        from std_srvs.srv import Trigger

        from wmr_model.ros.runner import retry_lost_responses

        self.calls = 0
        self.sent = 0
        self.lose = lose
        self.srv = ros.node.create_service(Trigger, name, self._callback)
        real_send = self.srv.send_response

        def lossy_send(response, header):
            if self.lose > 0:
                self.lose -= 1
                warnings.warn("failed to send response (timeout): client will not receive "
                              "response", RuntimeWarning, stacklevel=2)
                return
            self.sent += 1
            real_send(response, header)

        self.srv.send_response = lossy_send
        if reliable:
            retry_lost_responses(ros.node, self.srv)

    def _callback(self, request, response):
        self.calls += 1
        response.success, response.message = True, f"call {self.calls}"
        return response


def _client(ros, name):
    from std_srvs.srv import Trigger

    return ros.node.create_client(Trigger, name)


def test_server_resends_a_response_dds_did_not_deliver(ros):
    from std_srvs.srv import Trigger

    from wmr_model.ros.runner import call_service, lost_responses

    server = _Server(ros, "/delivery/reliable", lose=3, reliable=True)
    # no client-side re-send: the answer can only come from the server's retry
    resp = call_service(_client(ros, "/delivery/reliable"), Trigger.Request(), timeout=20.0,
                        spin=ros.spin_once, resend_after=math.inf)
    assert resp.success and resp.message == "call 1"
    assert (server.calls, server.sent, server.lose) == (1, 1, 0)
    assert lost_responses(ros.node) == 0


def test_client_resends_a_request_whose_answer_was_lost(ros):
    from std_srvs.srv import Trigger

    from wmr_model.ros.runner import call_service

    server = _Server(ros, "/delivery/plain", lose=1, reliable=False)
    client = _client(ros, "/delivery/plain")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(TimeoutError, match="no response from /delivery/plain"):
            call_service(client, Trigger.Request(), timeout=2.0, spin=ros.spin_once,
                         resend_after=math.inf)
        server.lose = 1
        resp = call_service(client, Trigger.Request(), timeout=20.0, spin=ros.spin_once,
                            resend_after=0.5)
    assert resp.success and resp.message == "call 3"  # the first call, its loss, the resend
    assert server.calls == 3 and server.sent == 1
