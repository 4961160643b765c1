use super::*;

use crate::socket::tcp::Socket;

impl InterfaceInner {
    pub(crate) fn process_tcp<'frame>(
        &mut self,
        sockets: &mut SocketSet,
        handled_by_raw_socket: bool,
        ip_repr: IpRepr,
        ip_payload: &'frame [u8],
    ) -> Option<Packet<'frame>> {
        let (src_addr, dst_addr) = (ip_repr.src_addr(), ip_repr.dst_addr());

        // Per RFC 1122 §3.2.1.3, the unspecified address must never appear as a source
        // or destination in any IP datagram. Drop such TCP segments early to avoid
        // creating sockets with unspecified peers (which would later panic on egress).
        // This is not done at the iface level because it might be useful with
        // UDP or raw sockets, but it's definitely not useful for TCP.
        if src_addr.is_unspecified() || dst_addr.is_unspecified() {
            return None;
        }

        let tcp_packet = check!(TcpPacket::new_checked(ip_payload));
        let tcp_repr = check!(TcpRepr::parse(
            &tcp_packet,
            &src_addr,
            &dst_addr,
            &self.caps.checksum
        ));

        for tcp_socket in sockets
            .items_mut()
            .filter_map(|i| Socket::downcast_mut(&mut i.socket))
        {
            if tcp_socket.accepts(self, &ip_repr, &tcp_repr) {
                return tcp_socket
                    .process(self, &ip_repr, &tcp_repr)
                    .map(|(ip, tcp)| Packet::new(ip, IpPayload::Tcp(tcp)));
            }
        }

        if tcp_repr.control == TcpControl::Rst
            || ip_repr.dst_addr().is_unspecified()
            || ip_repr.src_addr().is_unspecified()
            || handled_by_raw_socket
        {
            // Never reply to a TCP RST packet with another TCP RST packet.
            // Never send a TCP RST packet with unspecified addresses.
            // Never send a TCP RST when packet has been handled by raw socket.
            None
        } else {
            // The packet wasn't handled by a socket, send a TCP RST packet.
            let (ip, tcp) = tcp::Socket::rst_reply(&ip_repr, &tcp_repr);
            Some(Packet::new(ip, IpPayload::Tcp(tcp)))
        }
    }
}

impl Interface {
    /// [xsk-stack patch: fast-path] Header prediction for a segment the caller has
    /// already checked and matched to `socket` by its 4-tuple: an in-order ACK or
    /// ACK|PSH segment of an established connection goes straight to the socket
    /// (`tcp::Socket::process_fast`), skipping the Ethernet and IP layers, the socket
    /// search and the general TCP path; its effects are those of `poll_ingress_single`
    /// on the same frame, the neighbour's refresh included. Returns false, having
    /// changed no socket, where the segment needs the general path: then give its frame
    /// to `poll_ingress_single`.
    ///
    /// The caller vouches for what the layers skipped check: the frame is for our
    /// hardware and IPv4 address, from a unicast `src` at `src_hw`, not a fragment,
    /// with valid IP and TCP checksums; the TCP header carries ACK, perhaps PSH,
    /// no other flag and no options; `socket` is the socket of its 4-tuple.
    pub fn process_tcp_fast(
        &mut self,
        timestamp: Instant,
        socket: &mut crate::socket::tcp::Socket,
        src: IpAddress,
        src_hw: HardwareAddress,
        seg: &crate::socket::tcp::FastSegment,
    ) -> bool {
        self.inner.now = timestamp;
        if !socket.process_fast(&mut self.inner, seg) {
            return false;
        }
        #[cfg(feature = "medium-ethernet")]
        self.inner
            .neighbor_cache
            .reset_expiry_if_existing(src, src_hw, timestamp);
        #[cfg(not(feature = "medium-ethernet"))]
        let _ = (src, src_hw);
        true
    }
}
