// Rust test program for package symbolize: a generic function in a module.
mod shapes {
    pub struct Square(pub f64);
    impl Square {
        #[inline(never)]
        pub fn area(&self) -> f64 {
            self.0 * self.0
        }
    }
    #[inline(never)]
    pub fn total<T: Into<f64> + Copy>(xs: &[T]) -> f64 {
        xs.iter().map(|&x| x.into()).sum()
    }
}

fn main() {
    let s = shapes::Square(std::env::args().count() as f64);
    println!("{} {}", s.area(), shapes::total(&[1.0f32, 2.0]));
}
